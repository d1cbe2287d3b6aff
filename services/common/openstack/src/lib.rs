//! keelson's client of OpenStack services' REST APIs.
//!
//! - [`http`]: the one HTTP transport (http and https, timeouts, bounded
//!   answers, the request id and `traceparent` of the current request on
//!   every call);
//! - [`tls`]: https: a client's [`TlsSettings`] (CA file or the system's
//!   CAs, client certificate, insecure) and the pool's connector;
//! - [`session`]: a Keystone v3 [`Session`]: how it authenticates
//!   ([`AuthMethod`]: password, token or trust-scoped), the token it caches
//!   and renews before expiry, the service catalog (service type +
//!   interface + region) and authenticated calls to any service in it;
//! - [`identity`]: Keystone's own calls Heat needs (trusts, projects and
//!   users of the stack-user domain, role grants, EC2 credentials and
//!   `POST /v3/ec2tokens`);
//! - [`compute`]: Nova's calls of Heat's OS::Nova::* resources, at the
//!   microversion Heat negotiates;
//! - [`ec2`]: AWS signature version 2, as Keystone's `ec2tokens` checks it
//!   (Heat's pre-signed URLs);
//! - [`error`]: [`OsError`], what a call can meet, typed.
//! - [`identity_admin`]: Keystone's entities, grants and group membership
//!   (the OS::Keystone::* resource types);
//! - [`network`]: Neutron's v2.0 calls (a project deletion's security
//!   groups, Heat's OS::Neutron::* resources);
//! - [`image`]: Glance's image API v2 calls of OS::Glance::WebImage;
//! - [`volume`]: Cinder's block-storage API v3 calls of OS::Cinder::*;
//! - [`object_store`]: Swift's object storage API v1 calls of
//!   OS::Swift::Container and the Swift signal types, temp URLs;
//!
//! Service clients (compute, image, network, volume, object_store) are modules beside
//! `identity` over the same [`Session`].

pub mod compute;
pub mod ec2;
pub mod error;
pub mod http;
pub mod identity;
pub mod identity_admin;
pub mod image;
pub mod network;
pub mod object_store;
pub mod session;
pub mod tls;
pub mod volume;

pub use error::OsError;
pub use http::HttpClient;
pub use identity::Identity;
pub use session::{AccessInfo, AuthMethod, DomainRef, EndpointChoice, ProjectRef, Scope, Session, UserRef};
pub use tls::{TlsSettings, TlsSetupError};
