use keelson_hot::PseudoParams;
use serde_json::{json, Map, Value};

use super::*;
use crate::definition::StackDefinition;
use crate::resources::neutron::testing as neutron_standin;
use crate::resources::nova::testing as nova_standin;
use crate::resources::schema::{Constraint, PropertyType, ResourceSchema, SupportStatus};
use crate::resources::{neutron, validate_properties, Registry};

fn pseudo() -> PseudoParams {
    PseudoParams { stack_id: "sid".into(), stack_name: "st".into(), project_id: "p".into(), region: "RegionOne".into() }
}

fn neutron_registry() -> Registry {
    let mut registry = Registry::builtin();
    neutron::register(&mut registry);
    registry
}

/// A stack with one subnet on network `network`.
fn subnet_stack(network: Value) -> StackDefinition {
    let t = json!({"heat_template_version": "2018-08-31", "resources": {
        "net": {"type": "OS::Neutron::Net"},
        "sub": {"type": "OS::Neutron::Subnet", "properties": {"network": network, "cidr": "10.0.0.0/24"}}}});
    StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap()
}

/// What creating the stack answers: its validation, then its service
/// constraints asked through `session`.
async fn validated(def: &StackDefinition, registry: &Registry, session: &Session) -> Result<(), EngineError> {
    def.validate(registry)?;
    check_stack(session, &def.required_services(registry), &def.service_constraint_checks(registry)?).await
}

#[tokio::test]
async fn a_stack_naming_no_network_is_refused_with_heats_text() {
    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/networks?name=nope&fields=id", 200, json!({"networks": []}));
    neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
    let registry = neutron_registry();
    let e = validated(&subnet_stack(json!("nope")), &registry, &session).await.unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed");
    assert_eq!(e.http_status(), 400);
    assert_eq!(
        e.message(),
        "Property error: resources.sub.properties.network: Error validating value 'nope': Unable to find network with name or id 'nope'"
    );
    validated(&subnet_stack(json!("private")), &registry, &session).await.unwrap();
    // Nothing was created: only the two lookups reached Neutron.
    let calls: Vec<String> = neutron.calls().into_iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    assert!(calls.iter().all(|c| c.starts_with("GET /network/v2.0/networks?name=")), "{calls:?}");
}

#[tokio::test]
async fn values_from_other_resources_are_not_checked() {
    let (neutron, session) = neutron_standin::neutron().await;
    let registry = neutron_registry();
    let def = subnet_stack(json!({"get_resource": "net"}));
    assert_eq!(def.service_constraint_checks(&registry).unwrap(), Vec::new());
    validated(&def, &registry, &session).await.unwrap();
    assert!(neutron.calls().is_empty());
}

#[test]
fn a_deprecated_property_naming_a_resource_is_not_checked_once_translated() {
    // Heat's TestTranslation: `network_id: {get_resource: net}` becomes
    // `network`, still a value from another resource.
    let registry = neutron_registry();
    let t = json!({"heat_template_version": "2018-08-31", "resources": {
        "net": {"type": "OS::Neutron::Net"},
        "sub": {"type": "OS::Neutron::Subnet", "properties": {"network_id": {"get_resource": "net"}, "cidr": "10.0.0.0/24"}}}});
    let def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    assert_eq!(def.service_constraint_checks(&registry).unwrap(), Vec::new());
    // A literal under the old name is checked as the new property.
    let t = json!({"heat_template_version": "2018-08-31", "resources": {
        "sub": {"type": "OS::Neutron::Subnet", "properties": {"network_id": "private", "cidr": "10.0.0.0/24"}}}});
    let def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    assert_eq!(def.service_constraint_checks(&registry).unwrap().len(), 1);
}

#[tokio::test]
async fn a_type_whose_service_is_missing_from_the_catalog_is_refused_as_heat_refuses_it() {
    // The Nova stand-in's catalog has no network service.
    let (nova, session) = nova_standin::nova("2.79").await;
    let registry = neutron_registry();
    let e = validated(&subnet_stack(json!("nope")), &registry, &session).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    // The first resource's type, before any property is looked at.
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service neutron is not available for resource type OS::Neutron::Net, reason: neutron network endpoint is not in service catalog."
    );
    assert!(nova.calls().is_empty());
}

#[tokio::test]
async fn a_type_needing_an_extension_neutron_lacks_is_refused() {
    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/extensions", 200, json!({"extensions": [{"alias": "router"}, {"alias": "qos"}]}));
    let registry = neutron_registry();
    let stack = |types: &[&str]| {
        let resources: Map<String, Value> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let props = if t.ends_with("Rule") { json!({"policy": "p", "min_kbps": 1}) } else { json!({}) };
                (format!("r{i}"), json!({"type": t, "properties": props}))
            })
            .collect();
        let t = json!({"heat_template_version": "2018-08-31", "resources": resources});
        StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap()
    };
    // Router and QoSPolicy need extensions Neutron has: one read of them.
    validated(&stack(&["OS::Neutron::Router", "OS::Neutron::QoSPolicy"]), &registry, &session).await.unwrap();
    let reads = neutron.calls().iter().filter(|(_, p, _)| p == "/network/v2.0/extensions").count();
    assert_eq!(reads, 1);
    let e = validated(&stack(&["OS::Neutron::QoSMinimumBandwidthRule"]), &registry, &session).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service neutron is not available for resource type OS::Neutron::QoSMinimumBandwidthRule, reason: Required extension qos-bw-minimum-ingress in neutron service is not available."
    );
}

#[tokio::test]
async fn the_listing_leaves_out_the_types_whose_service_or_extension_is_missing() {
    // Neutron without the minimum-bandwidth extension, and no Nova.
    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/extensions", 200, json!({"extensions": [{"alias": "router"}, {"alias": "qos"}]}));
    let mut registry = neutron_registry();
    crate::resources::nova::register(&mut registry);
    let mut hidden = unavailable_types(&session, registry.service_types()).await;
    hidden.sort_unstable();
    assert!(hidden.contains(&"OS::Neutron::QoSMinimumBandwidthRule"), "{hidden:?}");
    assert!(hidden.contains(&"OS::Nova::Server"), "{hidden:?}");
    assert!(!hidden.iter().any(|t| *t == "OS::Neutron::Net" || *t == "OS::Neutron::QoSPolicy"), "{hidden:?}");
    // Neutron's extensions are read once for the whole listing.
    assert_eq!(neutron.calls().iter().filter(|(_, p, _)| p == "/network/v2.0/extensions").count(), 1);

    // Showing one: Heat's resource_schema gives a fixed reason.
    let e = check_type_shown(&session, "OS::Nova::Server", RequiredService::NOVA).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service nova is not available for resource type OS::Nova::Server, reason: Service endpoint not in service catalog."
    );
    check_type_shown(&session, "OS::Neutron::Net", RequiredService::NEUTRON).await.unwrap();
}

#[tokio::test]
async fn flavors_resolve_by_id_then_by_unique_name() {
    let (nova, session) = nova_standin::nova("2.79").await;
    nova.answer("GET /compute/v2.1/flavors/f1", 200, json!({"flavor": {"id": "f1", "name": "m1.small"}}));
    nova.answer(
        "GET /compute/v2.1/flavors",
        200,
        json!({"flavors": [{"id": "f1", "name": "m1.small"}, {"id": "f2", "name": "twin"}, {"id": "f3", "name": "twin"}]}),
    );
    let check = |value: &str| PendingCheck {
        at: CheckedAt::Property { resource: "server".into(), path: vec!["flavor".into()] },
        constraint: ServiceConstraint::NovaFlavor,
        value: json!(value),
    };
    run_checks(&session, &[check("f1"), check("m1.small")]).await.unwrap();
    let e = run_checks(&session, &[check("m1.small"), check("nope")]).await.unwrap_err();
    assert_eq!(e.http_status(), 400);
    assert_eq!(
        e.message(),
        "Property error: resources.server.properties.flavor: Error validating value 'nope': No Flavor matching {'name': 'nope'}. (HTTP 404)"
    );
    // novaclient's NoUniqueMatch is not the constraint's: its (empty) text alone.
    let e = run_checks(&session, &[check("twin")]).await.unwrap_err();
    assert_eq!(e.message(), "Property error: resources.server.properties.flavor: ");
}

#[tokio::test]
async fn keypairs_are_looked_up_by_name() {
    let (nova, session) = nova_standin::nova("2.79").await;
    nova.answer("GET /compute/v2.1/os-keypairs/mine", 200, json!({"keypair": {"name": "mine", "public_key": "k"}}));
    let check = |value: &str| PendingCheck {
        at: CheckedAt::Property { resource: "server".into(), path: vec!["key_name".into()] },
        constraint: ServiceConstraint::NovaKeypair,
        value: json!(value),
    };
    run_checks(&session, &[check("mine"), check("")]).await.unwrap();
    let e = run_checks(&session, &[check("theirs")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.server.properties.key_name: Error validating value 'theirs': The Key (theirs) could not be found."
    );
    // A Nova that fails otherwise: novaclient's text alone.
    nova.answer(
        "GET /compute/v2.1/os-keypairs/broken",
        403,
        json!({"forbidden": {"code": 403, "message": "Policy doesn't allow it."}}),
    );
    let e = run_checks(&session, &[check("broken")]).await.unwrap_err();
    assert!(!e.message().contains("Error validating value"), "{}", e.message());
}

#[test]
fn service_values_are_gathered_in_lists_and_maps() {
    let item =
        PropertySchema::new("*", PropertyType::String, "").constraint(Constraint::custom("neutron.security_group"));
    let gateway =
        PropertySchema::new("network", PropertyType::String, "").constraint(Constraint::custom("neutron.network"));
    let schemas = vec![
        PropertySchema::new("groups", PropertyType::List, "").list_of(item),
        PropertySchema::new("gw", PropertyType::Map, "").map_of(vec![gateway]),
        PropertySchema::new("unset", PropertyType::String, "").constraint(Constraint::custom("glance.image")),
        PropertySchema::new("local", PropertyType::String, "").constraint(Constraint::custom("test_constr")),
    ];
    let props: Properties = json!({"groups": ["a", "b"], "gw": {"network": "ext"}, "unset": null, "local": "x"})
        .as_object()
        .cloned()
        .unwrap();
    let checks = pending_checks("r", &schemas, &props, &|_| false);
    let path_of = |c: &PendingCheck| match &c.at {
        CheckedAt::Property { path, .. } => path.clone(),
        CheckedAt::Parameter(name) => vec![name.clone()],
    };
    let found: Vec<(Vec<String>, Value)> = checks.iter().map(|c| (path_of(c), c.value.clone())).collect();
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        vec![
            (path(&["groups", "0"]), json!("a")),
            (path(&["groups", "1"]), json!("b")),
            (path(&["gw", "network"]), json!("ext")),
        ]
    );
    assert!(pending_checks("r", &schemas, &props, &|key| key == "groups").iter().all(|c| path_of(c)[0] == "gw"));
}

#[test]
fn local_constraints_refuse_while_properties_validate() {
    let schema = ResourceSchema {
        properties: vec![
            PropertySchema::new("cidr", PropertyType::String, "").constraint(Constraint::custom("net_cidr")),
            PropertySchema::new("ips", PropertyType::List, "")
                .list_of(PropertySchema::new("*", PropertyType::String, "").constraint(Constraint::custom("ip_addr"))),
            PropertySchema::new("domain", PropertyType::String, "").constraint(Constraint::custom("dns_domain")),
        ],
        attributes: vec![],
        support_status: SupportStatus::default(),
        description: "",
    };
    let err = |v: Value| validate_properties(&schema, "sub", &v).unwrap_err().message();
    assert_eq!(
        err(json!({"cidr": "10.0.0.0/33"})),
        "Property error: resources.sub.properties.cidr: Error validating value '10.0.0.0/33': Invalid net cidr invalid IPNetwork 10.0.0.0/33 "
    );
    assert_eq!(
        err(json!({"ips": ["8.8.8.8", "8.8.8"]})),
        "Property error: resources.sub.properties.ips[1]: Error validating value '8.8.8': Invalid IP address"
    );
    assert_eq!(
        err(json!({"domain": "example.org"})),
        "Property error: resources.sub.properties.domain: Error validating value 'example.org': 'example.org' must end with '.'."
    );
    assert!(validate_properties(&schema, "sub", &json!({"cidr": "10.0.0.0/24", "ips": ["::1"], "domain": "a.org."}))
        .is_ok());
    // Unresolved values are not checked.
    assert!(validate_properties(&schema, "sub", &json!({"cidr": null, "ips": [null]})).is_ok());
}

#[test]
fn iso_8601_refusals_give_no_reason() {
    assert_eq!(local_refusal("iso_8601", &json!("nope")), Some("Error validating value 'nope'".to_string()));
    assert_eq!(local_refusal("iso_8601", &json!("2020-01-01T00:00:00Z")), None);
    assert_eq!(local_refusal("test_constr", &json!("anything")), None);
    assert_eq!(local_refusal("neutron.network", &json!("nope")), None);
}

#[tokio::test]
async fn segments_are_found_as_openstacksdk_finds_them() {
    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/segments?name=seg", 200, json!({"segments": [{"id": "s1"}]}));
    neutron.answer("GET /network/v2.0/segments?name=twice", 200, json!({"segments": [{"id": "s1"}, {"id": "s2"}]}));
    neutron.answer("GET /network/v2.0/segments?name=none", 200, json!({"segments": []}));
    let check = |value: &str| PendingCheck {
        at: CheckedAt::Property { resource: "sub".into(), path: vec!["segment".into()] },
        constraint: ServiceConstraint::named("neutron.segment").unwrap(),
        value: json!(value),
    };
    run_checks(&session, &[check("seg")]).await.unwrap();
    let e = run_checks(&session, &[check("twice")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.sub.properties.segment: Error validating value 'twice': More than one Segment exists with the name 'twice'."
    );
    let e = run_checks(&session, &[check("none")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.sub.properties.segment: 'NoneType' object has no attribute 'id'"
    );
}

/// Through the API: a create naming a network Neutron does not have is
/// refused with Heat's 400 before anything is stored.
#[tokio::test]
async fn a_create_is_refused_before_anything_is_stored() {
    use crate::convergence::EngineSettings;
    use crate::identity::IdentitySettings;
    use crate::service::{Caller, Orchestration, ServiceSettings};
    use keelson_db::{DatabaseUrl, Db, PoolSettings};
    use std::sync::Arc;

    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/networks?name=nope&fields=id", 200, json!({"networks": []}));
    let keystone = session.identity_v3().trim_end_matches("/v3").to_string();
    let path = std::env::temp_dir().join(format!("keelson-constraints-{}.db", uuid::Uuid::new_v4()));
    let url = DatabaseUrl::parse(&format!("sqlite:///{}", path.display())).unwrap();
    let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
    crate::store::schema::sync(&db).await.unwrap();
    let registry = Arc::new(neutron_registry());
    let identity = IdentitySettings {
        auth_uri: keystone.clone(),
        trusts: false,
        trusts_delegated_roles: Vec::new(),
        auth_encryption_key: "constraints-test".into(),
        stack_user_domain: None,
        stack_domain_admin: None,
        stack_domain_admin_password: String::new(),
        heat_stack_user_role: "heat_stack_user".into(),
        trustee_auth_url: keystone,
        trustee: None,
        trustee_password: String::new(),
        client_retry_limit: 0,
        client_timeout: keelson_openstack::http::DEFAULT_TIMEOUT,
        endpoints: keelson_openstack::EndpointChoice::default(),
        tls: keelson_openstack::TlsSettings::default(),
        client_tls: Default::default(),
    };
    let settings = EngineSettings { identity: Some(identity), ..EngineSettings::default() };
    let engine = crate::start_engine(db.clone(), registry.clone(), settings).await.unwrap();
    let api = Orchestration::new(engine, db.clone(), registry, ServiceSettings::default());
    let caller = Caller { auth_token: "tok".into(), ..crate::caller::test_admin() };
    let template = json!({"heat_template_version": "2018-08-31", "resources": {
        "sub": {"type": "OS::Neutron::Subnet", "properties": {"network": "nope", "cidr": "10.0.0.0/24"}}}});
    let e = api.create_stack(&caller, &json!({"stack_name": "s1", "template": template})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("StackValidationFailed", 400));
    assert_eq!(
        e.message(),
        "Property error: resources.sub.properties.network: Error validating value 'nope': Unable to find network with name or id 'nope'"
    );
    assert!(crate::store::stacks::get_by_name(&db, "p", "s1").await.unwrap().is_none());
    db.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn parameters_are_checked_before_resources() {
    let (nova, session) = nova_standin::nova("2.79").await;
    nova.answer("GET /compute/v2.1/flavors", 200, json!({"flavors": [{"id": "f1", "name": "m1.small"}]}));
    let t = |flavor: &str, address: &str| {
        json!({"heat_template_version": "2018-08-31",
            "parameters": {
                "flavor": {"type": "string", "default": flavor, "constraints": [{"custom_constraint": "nova.flavor"}]},
                "address": {"type": "string", "default": address, "constraints": [{"custom_constraint": "ip_addr"}]}},
            "resources": {}})
    };
    let registry = Registry::builtin();
    let def = |flavor: &str, address: &str| {
        StackDefinition::parse(&t(flavor, address), &Map::new(), &json!({}), &pseudo()).unwrap()
    };
    validated(&def("m1.small", "10.0.0.1"), &registry, &session).await.unwrap();
    let e = validated(&def("nope", "10.0.0.1"), &registry, &session).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("StackValidationFailed", 400));
    assert_eq!(
        e.message(),
        "Parameter 'flavor' is invalid: Error validating value 'nope': No Flavor matching {'name': 'nope'}. (HTTP 404)"
    );
    let e = validated(&def("m1.small", "10.0.0"), &registry, &session).await.unwrap_err();
    assert_eq!(e.message(), "Parameter 'address' is invalid: Error validating value '10.0.0': Invalid IP address");
}

#[tokio::test]
async fn images_and_volume_types_are_refused_with_their_clients_texts() {
    // The Nova stand-in's catalog also names it as `image` and `volumev3`.
    let (nova, session) = nova_standin::nova("2.79").await;
    nova.answer("GET /image/v2/images?name=nope", 200, json!({"images": []}));
    nova.answer("GET /image/v2/images?name=cirros", 200, json!({"images": [{"id": "i1"}]}));
    nova.answer("GET /volume/v3/p1/types?is_public=None", 200, json!({"volume_types": [{"id": "t1", "name": "fast"}]}));
    let check = |name: &str, prop: &str, value: &str| PendingCheck {
        at: CheckedAt::Property { resource: "vol".into(), path: vec![prop.into()] },
        constraint: ServiceConstraint::named(name).unwrap(),
        value: json!(value),
    };
    run_checks(&session, &[check("glance.image", "image", "cirros"), check("cinder.vtype", "volume_type", "fast")])
        .await
        .unwrap();
    run_checks(&session, &[check("cinder.vtype", "volume_type", "t1")]).await.unwrap();
    let e = run_checks(&session, &[check("glance.image", "image", "nope")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.vol.properties.image: Error validating value 'nope': No images matching {'name': 'nope'}."
    );
    let e = run_checks(&session, &[check("cinder.vtype", "volume_type", "slow")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.vol.properties.volume_type: Error validating value 'slow': The VolumeType (slow) could not be found."
    );
    let e = run_checks(&session, &[check("cinder.volume", "source_volid", "v9")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.vol.properties.source_volid: Error validating value 'v9': The Volume (v9) could not be found."
    );
}

#[tokio::test]
async fn keystone_entities_missing_are_refused_and_other_errors_shown_alone() {
    let (nova, session) = nova_standin::nova("2.79").await;
    nova.answer("GET /v3/projects?name=demo", 200, json!({"projects": [{"id": "p-id", "name": "demo"}]}));
    nova.answer("GET /v3/projects?name=nope", 200, json!({"projects": []}));
    let check = |value: &str| PendingCheck {
        at: CheckedAt::Property { resource: "quota".into(), path: vec!["project".into()] },
        constraint: ServiceConstraint::named("keystone.project").unwrap(),
        value: json!(value),
    };
    run_checks(&session, &[check("demo")]).await.unwrap();
    let e = run_checks(&session, &[check("nope")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.quota.properties.project: Error validating value 'nope': The KeystoneProject (nope) could not be found."
    );
    // Keystone answering an error: keystoneauth's text, not the constraint's.
    let e = run_checks(&session, &[check("gone")]).await.unwrap_err();
    assert_eq!(
        e.message(),
        "Property error: resources.quota.properties.project: /v3/projects?name=gone not found (HTTP 404)"
    );
}

/// What creating the stack of template `t` answers for Heat's types
/// keelson does not implement: their services asked first (as the stack
/// service does when `session` is the caller's), then the validation.
async fn created(t: Value, registry: &Registry, session: Option<&Session>) -> Result<(), EngineError> {
    let mut def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    let pending = crate::resources::unimplemented::needing_service(registry, &def.resource_types(registry));
    if let Some(session) = session {
        def.set_unavailable_types(unavailable_reasons(session, &pending).await);
    }
    def.validate(registry)
}

fn one_resource(type_name: &str, properties: Value) -> Value {
    json!({"heat_template_version": "2015-10-15", "resources": {
        "r": {"type": type_name, "properties": properties}}})
}

#[tokio::test]
async fn a_type_keelson_lacks_is_unavailable_as_in_heat_when_its_service_is_missing() {
    // A catalog with Neutron only, without fwaas.
    let (neutron, session) = neutron_standin::neutron().await;
    neutron.answer("GET /network/v2.0/extensions", 200, json!({"extensions": [{"alias": "router"}]}));
    let registry = neutron_registry();
    // Heat's functional test: Manila's share on a cloud without Manila
    // (its properties are not looked at).
    let share = one_resource("OS::Manila::Share", json!({"name": "n", "share_protocol": "NFS", "size": 1}));
    let e = created(share.clone(), &registry, Some(&session)).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service manila is not available for resource type OS::Manila::Share, reason: manila sharev2 endpoint is not in service catalog."
    );
    let e = created(one_resource("OS::Neutron::Firewall", json!({"bogus": 1})), &registry, Some(&session))
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service neutron is not available for resource type OS::Neutron::Firewall, reason: Required extension fwaas in neutron service is not available."
    );
    // In a nested stack too.
    let group =
        one_resource("OS::Heat::ResourceGroup", json!({"count": 1, "resource_def": {"type": "OS::Manila::Share"}}));
    let e = created(group, &registry, Some(&session)).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    assert_eq!(
        e.message(),
        "resources.r<nested_stack>: HEAT-E99001 Service manila is not available for resource type OS::Manila::Share, reason: manila sharev2 endpoint is not in service catalog."
    );
    // Its service is there (Neutron), or nobody to ask: not implemented here.
    let e =
        created(one_resource("OS::Neutron::MeteringLabel", json!({})), &registry, Some(&session)).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("HTTPBadRequest", 400));
    assert_eq!(e.message(), "The Resource Type (OS::Neutron::MeteringLabel) is not implemented by keelson.");
    let e = created(share, &registry, None).await.unwrap_err();
    assert_eq!(e.message(), "The Resource Type (OS::Manila::Share) is not implemented by keelson.");
    let e = created(one_resource("OS::Heat::Delay", json!({})), &registry, Some(&session)).await.unwrap_err();
    assert_eq!(e.message(), "The Resource Type (OS::Heat::Delay) is not implemented by keelson.");
    // Heat's retired types are its hidden placeholders, with no service.
    created(one_resource("OS::Sahara::Cluster", json!({"anything": 1})), &registry, Some(&session)).await.unwrap();
    let e = created(one_resource("OS::No::Such", json!({})), &registry, Some(&session)).await.unwrap_err();
    assert_eq!(e.message(), "The Resource Type (OS::No::Such) could not be found.");
    // Only the firewall's stack needed Neutron's extensions.
    assert_eq!(neutron.calls().iter().filter(|(_, p, _)| p == "/network/v2.0/extensions").count(), 1);
}

#[tokio::test]
async fn validation_passes_over_what_ignore_errors_names_by_code() {
    let (_neutron, session) = neutron_standin::neutron().await;
    let registry = neutron_registry();
    let share = one_resource("OS::Manila::Share", json!({}));
    let e = created(share, &registry, Some(&session)).await.unwrap_err();
    assert_eq!(e.error_code(), Some(crate::error::HeatErrorCode::ServiceUnavailable));
    let ignored = [crate::error::HeatErrorCode::ServiceUnavailable];
    assert_eq!(crate::error::ignoring(Err(e), &ignored), Ok(()));
    // Not implemented by keelson: an error with no code, never ignored.
    let e = created(one_resource("OS::Heat::Delay", json!({})), &registry, Some(&session)).await.unwrap_err();
    assert!(crate::error::ignoring(Err(e), &ignored).is_err());
}

#[tokio::test]
async fn an_ignored_error_passes_over_its_resource_only_as_in_heat() {
    let (_neutron, session) = neutron_standin::neutron().await;
    let registry = neutron_registry();
    let t = json!({"heat_template_version": "2015-10-15", "resources": {
        "a": {"type": "OS::Manila::Share", "properties": {}},
        "b": {"type": "OS::Heat::RandomString", "properties": {"length": "many"}}}});
    let mut def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    let pending = crate::resources::unimplemented::needing_service(&registry, &def.resource_types(&registry));
    def.set_unavailable_types(unavailable_reasons(&session, &pending).await);
    let ignored = [crate::error::HeatErrorCode::ServiceUnavailable];
    // The share's error is passed over; the string's after it is not.
    let e = def.validate_passing_over(&registry, &ignored).unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed");
    assert!(e.message().contains("resources.b.properties.length"), "{}", e.message());
    let t = json!({"heat_template_version": "2015-10-15", "resources": {
        "a": {"type": "OS::Manila::Share", "properties": {}},
        "b": {"type": "OS::Heat::RandomString", "properties": {"length": 8}}}});
    let mut def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    def.set_unavailable_types(unavailable_reasons(&session, &pending).await);
    def.validate_passing_over(&registry, &ignored).unwrap();
    assert_eq!(def.validate(&registry).unwrap_err().error_code(), Some(ignored[0]));
}

#[tokio::test]
async fn the_retired_combination_alarm_needs_aodh_as_in_heat() {
    // The Neutron stand-in's catalog has no alarming service.
    let (_neutron, session) = neutron_standin::neutron().await;
    let mut registry = neutron_registry();
    registry.register(std::sync::Arc::new(crate::resources::NoneResource::combination_alarm()));
    let t = one_resource("OS::Aodh::CombinationAlarm", json!({}));
    let def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
    let e = validated(&def, &registry, &session).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceTypeUnavailable", 400));
    assert_eq!(
        e.message(),
        "HEAT-E99001 Service aodh is not available for resource type OS::Aodh::CombinationAlarm, reason: aodh alarming endpoint is not in service catalog."
    );
}
