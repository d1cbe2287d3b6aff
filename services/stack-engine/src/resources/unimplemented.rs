//! The resource types Heat 27.0.1 registers that keelson does not
//! implement, each with the service Heat's plugin acts through (the
//! class's `default_client_name`, that client plugin's `service_types`,
//! and the Neutron extension the class requires). Heat checks that service
//! as it instantiates a resource, before its properties: on a cloud
//! without it, a stack using the type gets Heat's own
//! `ResourceTypeUnavailable`; otherwise keelson says it does not implement
//! the type. None: Heat runs the type without a service. (The retired
//! types Heat keeps as hidden no-ops keelson registers: `NoneResource::retired`.)

use super::{Registry, RequiredService};
use crate::error::EngineError;

const fn service(client: &'static str, service_types: &'static [&'static str]) -> Option<RequiredService> {
    Some(RequiredService { client, service_types, extensions: &[] })
}

const fn neutron_with(extensions: &'static [&'static str]) -> Option<RequiredService> {
    Some(RequiredService::neutron_with(extensions))
}

const NOVA: Option<RequiredService> = Some(RequiredService::NOVA);
const NEUTRON: Option<RequiredService> = Some(RequiredService::NEUTRON);
// Heat's Cinder types also name a Cinder extension; only Neutron's
// extensions are read here (as for the Cinder types keelson implements).
const CINDER: Option<RequiredService> = service("cinder", &["volumev3"]);
const KEYSTONE: Option<RequiredService> = service("keystone", &["identity"]);
const HEAT: Option<RequiredService> = service("heat", &["orchestration", "cloudformation"]);
const SWIFT: Option<RequiredService> = Some(RequiredService::SWIFT);
const AODH: Option<RequiredService> = Some(RequiredService::AODH);
const BARBICAN: Option<RequiredService> = service("barbican", &["key-manager"]);
const BLAZAR: Option<RequiredService> = service("blazar", &["reservation"]);
const DESIGNATE: Option<RequiredService> = service("designate", &["dns"]);
const IRONIC: Option<RequiredService> = service("ironic", &["baremetal"]);
const MAGNUM: Option<RequiredService> = service("magnum", &["container-infra"]);
const MANILA: Option<RequiredService> = service("manila", &["sharev2"]);
const MISTRAL: Option<RequiredService> = service("mistral", &["workflowv2"]);
const OCTAVIA: Option<RequiredService> = service("octavia", &["load-balancer"]);
const TROVE: Option<RequiredService> = service("trove", &["database"]);
const ZAQAR: Option<RequiredService> = service("zaqar", &["messaging"]);
const ZUN: Option<RequiredService> = service("zun", &["container"]);

/// Heat 27.0.1's types keelson's registry lacks, by name.
pub const UNIMPLEMENTED: &[(&str, Option<RequiredService>)] = &[
    ("AWS::EC2::EIP", NOVA),
    ("AWS::EC2::EIPAssociation", NOVA),
    ("AWS::EC2::InternetGateway", None),
    ("AWS::EC2::NetworkInterface", NEUTRON),
    ("AWS::EC2::RouteTable", NEUTRON),
    ("AWS::EC2::SecurityGroup", None),
    ("AWS::EC2::Subnet", NEUTRON),
    ("AWS::EC2::SubnetRouteTableAssociation", NEUTRON),
    ("AWS::EC2::VPC", NEUTRON),
    ("AWS::EC2::VPCGatewayAttachment", NEUTRON),
    ("AWS::EC2::Volume", CINDER),
    ("AWS::EC2::VolumeAttachment", CINDER),
    ("AWS::ElasticLoadBalancing::LoadBalancer", None),
    ("AWS::IAM::AccessKey", None),
    ("AWS::IAM::User", None),
    ("AWS::S3::Bucket", SWIFT),
    ("OS::Aodh::Alarm", AODH),
    ("OS::Aodh::CompositeAlarm", AODH),
    ("OS::Aodh::EventAlarm", AODH),
    ("OS::Aodh::GnocchiAggregationByMetricsAlarm", AODH),
    ("OS::Aodh::GnocchiAggregationByResourcesAlarm", AODH),
    ("OS::Aodh::GnocchiResourcesAlarm", AODH),
    ("OS::Aodh::LBMemberHealthAlarm", AODH),
    ("OS::Aodh::PrometheusAlarm", AODH),
    ("OS::Barbican::CertificateContainer", BARBICAN),
    ("OS::Barbican::GenericContainer", BARBICAN),
    ("OS::Barbican::Order", BARBICAN),
    ("OS::Barbican::RSAContainer", BARBICAN),
    ("OS::Barbican::Secret", BARBICAN),
    ("OS::Blazar::Host", BLAZAR),
    ("OS::Blazar::Lease", BLAZAR),
    ("OS::Cinder::EncryptedVolumeType", CINDER),
    ("OS::Cinder::QoSAssociation", CINDER),
    ("OS::Cinder::QoSSpecs", CINDER),
    ("OS::Cinder::Quota", CINDER),
    ("OS::Designate::RecordSet", DESIGNATE),
    ("OS::Designate::Zone", DESIGNATE),
    ("OS::Heat::AccessPolicy", None),
    ("OS::Heat::Delay", None),
    ("OS::Heat::SoftwareComponent", HEAT),
    ("OS::Heat::StructuredDeployments", None),
    ("OS::Ironic::Port", IRONIC),
    ("OS::Keystone::Region", KEYSTONE),
    ("OS::Magnum::BayModel", MAGNUM),
    ("OS::Magnum::Cluster", MAGNUM),
    ("OS::Magnum::ClusterTemplate", MAGNUM),
    ("OS::Manila::SecurityService", MANILA),
    ("OS::Manila::Share", MANILA),
    ("OS::Manila::ShareNetwork", MANILA),
    ("OS::Manila::ShareType", MANILA),
    ("OS::Mistral::CronTrigger", MISTRAL),
    ("OS::Mistral::ExternalResource", MISTRAL),
    ("OS::Mistral::Workflow", MISTRAL),
    ("OS::Neutron::AddressScope", neutron_with(&["address-scope"])),
    ("OS::Neutron::ExtraRoute", neutron_with(&["extraroute"])),
    ("OS::Neutron::ExtraRouteSet", neutron_with(&["extraroute-atomic"])),
    ("OS::Neutron::Firewall", neutron_with(&["fwaas"])),
    ("OS::Neutron::FirewallPolicy", neutron_with(&["fwaas"])),
    ("OS::Neutron::FirewallRule", neutron_with(&["fwaas"])),
    // Heat's openstacksdk client ("openstack") on the network service.
    (
        "OS::Neutron::FloatingIPPortForward",
        Some(RequiredService {
            client: "openstack",
            service_types: &["network"],
            extensions: &["floating-ip-port-forwarding"],
        }),
    ),
    ("OS::Neutron::FlowClassifier", NEUTRON),
    ("OS::Neutron::IKEPolicy", neutron_with(&["vpnaas"])),
    ("OS::Neutron::IPsecPolicy", neutron_with(&["vpnaas"])),
    ("OS::Neutron::IPsecSiteConnection", neutron_with(&["vpnaas"])),
    ("OS::Neutron::L2Gateway", neutron_with(&["l2-gateway"])),
    ("OS::Neutron::L2GatewayConnection", neutron_with(&["l2-gateway-connection"])),
    ("OS::Neutron::MeteringLabel", NEUTRON),
    ("OS::Neutron::MeteringRule", NEUTRON),
    ("OS::Neutron::NetworkGateway", NEUTRON),
    ("OS::Neutron::PortChain", neutron_with(&["sfc"])),
    ("OS::Neutron::PortPair", NEUTRON),
    ("OS::Neutron::PortPairGroup", neutron_with(&["sfc"])),
    ("OS::Neutron::ProviderNet", neutron_with(&["provider"])),
    ("OS::Neutron::Quota", neutron_with(&["quotas"])),
    ("OS::Neutron::RBACPolicy", neutron_with(&["rbac-policies"])),
    ("OS::Neutron::RouterGateway", NEUTRON),
    ("OS::Neutron::Segment", neutron_with(&["segment"])),
    ("OS::Neutron::SubnetPool", neutron_with(&["subnet_allocation"])),
    ("OS::Neutron::TaaS::TapFlow", neutron_with(&["taas"])),
    ("OS::Neutron::TaaS::TapService", neutron_with(&["taas"])),
    ("OS::Neutron::Trunk", neutron_with(&["trunk"])),
    ("OS::Neutron::VPNService", neutron_with(&["vpnaas"])),
    ("OS::Nova::FloatingIP", None),
    ("OS::Nova::FloatingIPAssociation", NOVA),
    ("OS::Nova::HostAggregate", NOVA),
    ("OS::Octavia::AvailabilityZone", OCTAVIA),
    ("OS::Octavia::AvailabilityZoneProfile", OCTAVIA),
    ("OS::Octavia::Flavor", OCTAVIA),
    ("OS::Octavia::FlavorProfile", OCTAVIA),
    ("OS::Octavia::HealthMonitor", OCTAVIA),
    ("OS::Octavia::L7Policy", OCTAVIA),
    ("OS::Octavia::L7Rule", OCTAVIA),
    ("OS::Octavia::Listener", OCTAVIA),
    ("OS::Octavia::LoadBalancer", OCTAVIA),
    ("OS::Octavia::Pool", OCTAVIA),
    ("OS::Octavia::PoolMember", OCTAVIA),
    ("OS::Octavia::Quota", OCTAVIA),
    ("OS::Trove::Cluster", TROVE),
    ("OS::Trove::Instance", TROVE),
    ("OS::Zaqar::MistralTrigger", ZAQAR),
    ("OS::Zaqar::Queue", ZAQAR),
    ("OS::Zaqar::SignedQueueURL", ZAQAR),
    ("OS::Zaqar::Subscription", ZAQAR),
    ("OS::Zun::Container", ZUN),
];

/// Whether `type_name` is one of Heat's types keelson does not implement,
/// and the service Heat's plugin for it needs (None: no service).
pub fn lookup(type_name: &str) -> Option<Option<RequiredService>> {
    UNIMPLEMENTED.iter().find(|(name, _)| *name == type_name).map(|(_, service)| *service)
}

/// Of `types` (those a stack uses), Heat's that `registry` lacks and
/// that Heat runs through a service, with that service: their
/// availability decides what validation answers for them.
pub fn needing_service<'a>(
    registry: &Registry,
    types: impl IntoIterator<Item = &'a String>,
) -> Vec<(String, RequiredService)> {
    types
        .into_iter()
        .filter(|t| registry.get(t).is_none())
        .filter_map(|t| lookup(t).flatten().map(|required| (t.clone(), required)))
        .collect()
}

/// The 400 for a stack using one of Heat's types keelson does not
/// implement (where its service is available, or cannot be asked): Heat's
/// error for an unknown type, with a text that says why.
pub fn not_implemented(type_name: &str) -> EngineError {
    EngineError::BadRequest(format!("The Resource Type ({type_name}) is not implemented by keelson."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_heats() {
        let of = |t: &str| lookup(t).unwrap().map(|s| (s.client, s.service_types.to_vec(), s.extensions.to_vec()));
        assert_eq!(of("OS::Manila::Share"), Some(("manila", vec!["sharev2"], vec![])));
        assert_eq!(of("OS::Trove::Instance"), Some(("trove", vec!["database"], vec![])));
        assert_eq!(of("AWS::S3::Bucket"), Some(("swift", vec!["object-store"], vec![])));
        assert_eq!(of("OS::Octavia::LoadBalancer"), Some(("octavia", vec!["load-balancer"], vec![])));
        assert_eq!(of("OS::Neutron::Firewall"), Some(("neutron", vec!["network"], vec!["fwaas"])));
        assert_eq!(of("OS::Heat::SoftwareComponent"), Some(("heat", vec!["orchestration", "cloudformation"], vec![])));
        assert_eq!(of("OS::Heat::Delay"), None);
        assert_eq!(lookup("OS::Sahara::Cluster"), None);
        assert_eq!(lookup("OS::No::Such"), None);
        assert_eq!(lookup("OS::Nova::Server"), None);
    }

    #[test]
    fn no_entry_is_a_registered_type_and_none_twice() {
        let mut registry = Registry::builtin();
        registry.add_openstack_types();
        for (name, _) in UNIMPLEMENTED {
            assert!(registry.get(name).is_none(), "{name} is implemented");
        }
        let mut names: Vec<&str> = UNIMPLEMENTED.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), UNIMPLEMENTED.len());
        // With keelson's own types, the table covers Heat 27.0.1's 201.
        assert_eq!(registry.type_names().len() + UNIMPLEMENTED.len(), 201);
    }
}
