//! The custom constraints Heat checks by asking a service whether the
//! value names something (`heat/engine/clients/os/*.py`: each plugin's
//! constraint class and the getter it calls), asked through the session
//! of whoever validates the stack. Each uses the same lookup (and texts)
//! its service's resource types resolve names with.

use keelson_openstack::compute::Compute;
use keelson_openstack::identity_admin::Entity;
use keelson_openstack::image::Image;
use keelson_openstack::network::{self, Kind, Lookup, Network};
use keelson_openstack::volume::Volume;
use keelson_openstack::{OsError, Session};
use serde_json::Value;

use super::super::cinder::{self, CinderEntity};
use super::super::client_errors::KEYSTONEAUTH;
use super::super::{glance, keystone, neutron, nova, RequiredService, ResourceFailure};
use crate::error::{EngineError, HeatErrorCode};

/// A custom constraint a service checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceConstraint {
    /// `neutron.network`, `neutron.subnet`, ...: neutronclient's
    /// name-or-id lookup; `extension` must be enabled first.
    Neutron { kind: Kind, extension: Option<&'static str> },
    /// `neutron.segment`: openstacksdk's `find_segment`.
    NeutronSegment,
    /// `nova.flavor`: by id, else by its unique name.
    NovaFlavor,
    /// `nova.keypair`: by name; an empty name passes.
    NovaKeypair,
    /// `glance.image`: by id, else by its unique name.
    GlanceImage,
    /// `keystone.project`, `keystone.user`, ...
    Keystone(Entity),
    /// `cinder.volume`, `cinder.snapshot`, `cinder.backup`, `cinder.vtype`.
    Cinder(CinderEntity),
}

impl ServiceConstraint {
    /// The service constraint Heat registers under `name`, if any.
    pub fn named(name: &str) -> Option<ServiceConstraint> {
        let neutron = |kind| Some(ServiceConstraint::Neutron { kind, extension: None });
        match name {
            "neutron.network" => neutron(network::NETWORK),
            "neutron.subnet" => neutron(network::SUBNET),
            "neutron.router" => neutron(network::ROUTER),
            "neutron.port" => neutron(network::PORT),
            "neutron.security_group" => neutron(network::SECURITY_GROUP),
            "neutron.subnetpool" => neutron(network::SUBNETPOOL),
            "neutron.qos_policy" => {
                Some(ServiceConstraint::Neutron { kind: network::QOS_POLICY, extension: Some("qos") })
            }
            "neutron.segment" => Some(ServiceConstraint::NeutronSegment),
            "nova.flavor" => Some(ServiceConstraint::NovaFlavor),
            "nova.keypair" => Some(ServiceConstraint::NovaKeypair),
            "glance.image" => Some(ServiceConstraint::GlanceImage),
            "keystone.project" => Some(ServiceConstraint::Keystone(Entity::Project)),
            "keystone.domain" => Some(ServiceConstraint::Keystone(Entity::Domain)),
            "keystone.role" => Some(ServiceConstraint::Keystone(Entity::Role)),
            "keystone.user" => Some(ServiceConstraint::Keystone(Entity::User)),
            "keystone.group" => Some(ServiceConstraint::Keystone(Entity::Group)),
            "keystone.service" => Some(ServiceConstraint::Keystone(Entity::Service)),
            "keystone.region" => Some(ServiceConstraint::Keystone(Entity::Region)),
            "cinder.volume" => Some(ServiceConstraint::Cinder(CinderEntity::Volume)),
            "cinder.snapshot" => Some(ServiceConstraint::Cinder(CinderEntity::Snapshot)),
            "cinder.backup" => Some(ServiceConstraint::Cinder(CinderEntity::Backup)),
            "cinder.vtype" => Some(ServiceConstraint::Cinder(CinderEntity::VolumeType)),
            _ => None,
        }
    }

    /// The catalog types that may serve the constraint's service; None for
    /// Keystone, which the session itself speaks to.
    fn service(self) -> Option<RequiredService> {
        match self {
            ServiceConstraint::Neutron { .. } | ServiceConstraint::NeutronSegment => Some(RequiredService::NEUTRON),
            ServiceConstraint::NovaFlavor | ServiceConstraint::NovaKeypair => Some(RequiredService::NOVA),
            ServiceConstraint::GlanceImage => Some(RequiredService::GLANCE),
            ServiceConstraint::Keystone(_) => None,
            ServiceConstraint::Cinder(_) => Some(RequiredService::CINDER),
        }
    }
}

/// Why a service refused a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceRefusal {
    /// An error the constraint expects (nothing by that name or id): Heat
    /// shows it after `Error validating value '<value>': `.
    Invalid(String),
    /// Any other error of the service: Heat shows its text alone.
    Failed(String),
}

/// The message of a failure the families' lookups answer.
fn text_of(failure: &ResourceFailure) -> String {
    failure.exception().map(|(_, message)| message.to_string()).unwrap_or_default()
}

fn invalid(failure: ResourceFailure) -> ServiceRefusal {
    ServiceRefusal::Invalid(text_of(&failure))
}

fn failed(failure: ResourceFailure) -> ServiceRefusal {
    ServiceRefusal::Failed(text_of(&failure))
}

/// Whether the session's catalog has the constraint's service. Heat
/// refuses a resource type whose own service is missing before its
/// properties are looked at; a constraint on a missing service is not
/// checked.
async fn in_catalog(session: &Session, constraint: ServiceConstraint) -> Result<bool, ServiceRefusal> {
    let Some(service) = constraint.service() else { return Ok(true) };
    for service_type in service.service_types {
        match session.client_endpoint(service.client, service_type).await {
            Ok(_) => return Ok(true),
            Err(OsError::EndpointNotFound(_)) => {}
            Err(e) => return Err(failed(KEYSTONEAUTH.failure(e))),
        }
    }
    Ok(false)
}

/// What Heat's `is_service_available` answers for a type's service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// Heat's reason: the endpoint is not in the catalog, or an extension
    /// the type needs is missing.
    Unavailable(String),
}

/// Heat's `is_service_available`: one of the service's catalog types has
/// an endpoint and the service has every extension the type needs. Err:
/// the check itself failed (Keystone or Neutron refused), with the
/// failure's text. `extensions` holds Neutron's aliases once read.
pub async fn availability(
    session: &Session,
    required: RequiredService,
    extensions: &mut Option<Vec<String>>,
) -> Result<Availability, String> {
    let mut reason = String::new();
    for service_type in required.service_types {
        match session.client_endpoint(required.client, service_type).await {
            Ok(_) => {}
            Err(OsError::EndpointNotFound(_)) => {
                reason = format!("{} {service_type} endpoint is not in service catalog.", required.client);
                continue;
            }
            Err(e) => return Err(text_of(&KEYSTONEAUTH.failure(e))),
        }
        if required.extensions.is_empty() {
            return Ok(Availability::Available);
        }
        if extensions.is_none() {
            let neutron = Network::connect(session).await.map_err(|e| text_of(&neutron::failure(e)))?;
            *extensions = Some(neutron.extension_aliases().await.map_err(|e| text_of(&neutron::failure(e)))?);
        }
        let known = extensions.as_deref().unwrap_or_default();
        match required.extensions.iter().find(|ext| !known.iter().any(|k| k == *ext)) {
            None => return Ok(Availability::Available),
            Some(missing) => {
                reason = format!("Required extension {missing} in {} service is not available.", required.client);
            }
        }
    }
    Ok(Availability::Unavailable(reason))
}

/// Heat's 400 `ResourceTypeUnavailable` for `type_name` with `reason`.
pub fn unavailable(type_name: &str, required: RequiredService, reason: &str) -> EngineError {
    let message =
        format!("Service {} is not available for resource type {type_name}, reason: {reason}", required.client);
    EngineError::ResourceTypeUnavailable(HeatErrorCode::ServiceUnavailable.prefixed(&message))
}

/// Why a stack's resource may not use `required` ([`availability`]):
/// Heat's reason, or the failed check's text; None when it may.
pub async fn unavailable_reason(
    session: &Session,
    required: RequiredService,
    extensions: &mut Option<Vec<String>>,
) -> Option<String> {
    match availability(session, required, extensions).await {
        Ok(Availability::Available) => None,
        Ok(Availability::Unavailable(reason)) | Err(reason) => Some(reason),
    }
}

/// A stack's resource of `type_name` needs its service available; else
/// `ResourceTypeUnavailable` with [`unavailable_reason`].
pub async fn check_available(
    session: &Session,
    type_name: &str,
    required: RequiredService,
    extensions: &mut Option<Vec<String>>,
) -> Result<(), EngineError> {
    match unavailable_reason(session, required, extensions).await {
        None => Ok(()),
        Some(reason) => Err(unavailable(type_name, required, &reason)),
    }
}

/// Checks `value` against `constraint` through `session`, as Heat's
/// constraint class does; Ok when the service is not in the catalog.
pub async fn check(session: &Session, constraint: ServiceConstraint, value: &Value) -> Result<(), ServiceRefusal> {
    if !in_catalog(session, constraint).await? {
        return Ok(());
    }
    let text = crate::resources::properties::py_str(value);
    match constraint {
        ServiceConstraint::Neutron { kind, extension } => check_neutron(session, kind, extension, &text).await,
        ServiceConstraint::NeutronSegment => check_segment(session, &text).await,
        ServiceConstraint::NovaFlavor => check_flavor(session, &text).await,
        ServiceConstraint::NovaKeypair => check_keypair(session, &text).await,
        ServiceConstraint::GlanceImage => {
            let images = Image::connect(session).await.map_err(|e| failed(glance::failure(e)))?;
            let found = images.find(&text).await.map_err(|e| failed(glance::failure(e)))?;
            glance::match_result(&text, found).map(drop).map_err(invalid)
        }
        ServiceConstraint::Keystone(entity) => match keystone::keystone_lookup(session, entity, &text).await {
            Ok(found) => found.map(drop).map_err(invalid),
            Err(e) => Err(failed(e)),
        },
        ServiceConstraint::Cinder(entity) => {
            let volumes = Volume::connect(session).await.map_err(|e| failed(cinder::failure(e)))?;
            match cinder::entity_lookup(&volumes, entity, &text).await {
                Ok(found) => found.map_err(invalid),
                Err(e) => Err(failed(e)),
            }
        }
    }
}

/// Heat's `NeutronConstraint`: every neutronclient error is the
/// constraint's own.
async fn check_neutron(
    session: &Session,
    kind: Kind,
    extension: Option<&'static str>,
    value: &str,
) -> Result<(), ServiceRefusal> {
    let client = Network::connect(session).await.map_err(|e| invalid(neutron::failure(e)))?;
    if let Some(alias) = extension {
        let aliases = client.extension_aliases().await.map_err(|e| invalid(neutron::failure(e)))?;
        if !aliases.iter().any(|a| a == alias) {
            return Err(ServiceRefusal::Invalid(format!("The neutron extension ({alias}) could not be found.")));
        }
    }
    let found = client.lookup(kind, value).await.map_err(|e| invalid(neutron::failure(e)))?;
    neutron::lookup_result(kind, value, found).map(drop).map_err(invalid)
}

/// Heat's `SegmentConstraint`: openstacksdk's ResourceNotFound and
/// DuplicateResource are its own; `find_segment` answers None for a
/// missing segment, whose `.id` Heat then reads (an AttributeError).
async fn check_segment(session: &Session, value: &str) -> Result<(), ServiceRefusal> {
    let client = Network::connect(session).await.map_err(|e| failed(neutron::failure(e)))?;
    match neutron::segment_lookup(&client, value).await.map_err(failed)? {
        Lookup::Found(_) => Ok(()),
        Lookup::NotFound => Err(ServiceRefusal::Failed("'NoneType' object has no attribute 'id'".to_string())),
        ambiguous => neutron::segment_result(value, ambiguous).map(drop).map_err(invalid),
    }
}

/// Heat's `FlavorConstraint` (`find_flavor_by_name_or_id`): only
/// novaclient's NotFound is the constraint's own.
async fn check_flavor(session: &Session, value: &str) -> Result<(), ServiceRefusal> {
    let compute = Compute::connect(session).await.map_err(|e| failed(nova::failure(e)))?;
    let found = nova::flavor_lookup(&compute, value).await.map_err(|e| failed(nova::failure(e)))?;
    let missing = found == nova::FlavorMatch::None;
    match nova::flavor_result(value, found) {
        Ok(_) => Ok(()),
        Err(e) if missing => Err(invalid(e)),
        Err(e) => Err(failed(e)),
    }
}

/// Heat's `KeypairConstraint` (`get_keypair`).
async fn check_keypair(session: &Session, value: &str) -> Result<(), ServiceRefusal> {
    if value.is_empty() {
        return Ok(());
    }
    let compute = Compute::connect(session).await.map_err(|e| failed(nova::failure(e)))?;
    match compute.keypair_public_key(value).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Err(ServiceRefusal::Invalid(format!("The Key ({value}) could not be found."))),
        Err(e) => Err(failed(nova::failure(e))),
    }
}
