//! Heat's identity model (`heat/engine/clients/os/keystone/
//! heat_keystoneclient.py`, `heat/common/context.py`): what the engine
//! asks of Keystone on a user's behalf, through keelson-openstack.
//!
//! - At stack create, a **trust** from the user (trustor) to the
//!   `[trustee]` user, for the user's project, delegating
//!   `trusts_delegated_roles` (or all the user's roles), with
//!   impersonation; its id is stored encrypted (`user_creds`). Every later
//!   action on the stack acts through the trust ([`Identity::stored_context`]:
//!   the trustee authenticates scoped to the trust, and the token is the
//!   user's), long after the user's own token has expired; the trust is
//!   deleted with the stack.
//! - A **stack-user project** per stack in the stack-user domain
//!   (`stack_user_domain_id`/`_name`, managed by `stack_domain_admin`),
//!   and **stack users** in it, one per resource that hands credentials to
//!   an instance, holding `heat_stack_user_role` there, with EC2
//!   credentials for signed URLs. Their powers are what Heat's policy
//!   grants that role.
//!
//! Without `[clients_keystone] auth_uri` there is no [`Identity`] and the
//! engine behaves as Heat's noauth mode (no trusts, no stack users).

pub mod crypt;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use keelson_openstack::identity::{Ec2Credential, Identity as KeystoneApi, Roles};
use keelson_openstack::{
    AuthMethod, DomainRef, EndpointChoice, HttpClient, OsError, Scope, Session, TlsSettings, TlsSetupError, UserRef,
};
use keelson_runtime::Config;
use tokio::sync::OnceCell;

use crate::error::EngineError;
use crate::options::{
    ClientTlsOptions, AUTH_ENCRYPTION_KEY, CLIENTS_ENDPOINT_TYPE, CLIENTS_KEYSTONE_AUTH_URI, CLIENTS_KEYSTONE_TLS,
    CLIENTS_TLS, CLIENT_ENDPOINT_TYPES, CLIENT_RETRY_LIMIT, CLIENT_TLS, DEFERRED_AUTH_METHOD, HEAT_STACK_USER_ROLE,
    REGION_NAME_FOR_SERVICES, STACK_DOMAIN_ADMIN, STACK_DOMAIN_ADMIN_PASSWORD, STACK_USER_DOMAIN_ID,
    STACK_USER_DOMAIN_NAME, TRUSTEE_AUTH_URL, TRUSTEE_PASSWORD, TRUSTEE_USERNAME, TRUSTEE_USER_DOMAIN_ID,
    TRUSTEE_USER_DOMAIN_NAME, TRUSTEE_USER_ID, TRUSTS_DELEGATED_ROLES,
};
pub use crypt::{Crypt, CryptError};

/// How the engine reaches Keystone (Heat's options).
#[derive(Debug, Clone)]
pub struct IdentitySettings {
    /// `[clients_keystone] auth_uri`: Keystone as the engine and instances
    /// reach it.
    pub auth_uri: String,
    /// `deferred_auth_method = trusts`: a trust per stack.
    pub trusts: bool,
    pub trusts_delegated_roles: Vec<String>,
    pub auth_encryption_key: String,
    /// `stack_user_domain_id` (or `_name`): None, no stack users.
    pub stack_user_domain: Option<DomainRef>,
    pub stack_domain_admin: Option<String>,
    pub stack_domain_admin_password: String,
    pub heat_stack_user_role: String,
    /// `[trustee]`: who stacks' trusts delegate to (Heat's service user).
    pub trustee_auth_url: String,
    pub trustee: Option<UserRef>,
    pub trustee_password: String,
    pub client_retry_limit: u32,
    /// How long a call to a service may take.
    pub client_timeout: std::time::Duration,
    /// The catalog endpoints the stacks' clients use.
    pub endpoints: EndpointChoice,
    /// How the sessions reach Keystone over https: `[clients_keystone]`'s
    /// TLS options, else `[clients]`'s.
    pub tls: TlsSettings,
    /// The service clients (`nova`, ...) whose TLS settings differ from
    /// Keystone's: `[clients_<client>]`'s, else `[clients]`'s.
    pub client_tls: BTreeMap<String, TlsSettings>,
}

/// A client's TLS settings (Heat's `get_ssl_options`): each option of its
/// `[clients_<client>]` group where set, else `[clients]`'s.
pub fn client_tls(config: &Config, own: &ClientTlsOptions) -> TlsSettings {
    let path = |own: &keelson_runtime::config::Opt<Option<String>>, all| {
        config.get(own).or_else(|| config.get(all)).filter(|p| !p.trim().is_empty()).map(Into::into)
    };
    TlsSettings {
        ca_file: path(&own.ca_file, &CLIENTS_TLS.ca_file),
        cert_file: path(&own.cert_file, &CLIENTS_TLS.cert_file),
        key_file: path(&own.key_file, &CLIENTS_TLS.key_file),
        insecure: config.get(if config.is_set(&own.insecure) { &own.insecure } else { &CLIENTS_TLS.insecure }),
    }
}

/// Why the engine's Keystone cannot be used as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentitySetupError {
    #[error("auth_encryption_key: {0}")]
    Crypt(#[from] CryptError),
    /// `client`'s TLS files (`[clients_<client>]` or `[clients]`).
    #[error("[clients_{client}] TLS: {error}")]
    Tls { client: String, error: TlsSetupError },
}

impl IdentitySettings {
    /// None without `[clients_keystone] auth_uri` (noauth).
    pub fn from_config(config: &Config) -> Option<IdentitySettings> {
        let text = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let auth_uri = text(config.get(&CLIENTS_KEYSTONE_AUTH_URI))?;
        let domain = |id: Option<String>, name: Option<String>| match (text(id), text(name)) {
            (Some(id), _) => Some(DomainRef::Id(id)),
            (None, Some(name)) => Some(DomainRef::Name(name)),
            (None, None) => None,
        };
        let trustee = match (text(config.get(&TRUSTEE_USER_ID)), text(config.get(&TRUSTEE_USERNAME))) {
            (Some(id), _) => Some(UserRef::Id(id)),
            (None, Some(name)) => Some(UserRef::Name {
                name,
                domain: domain(config.get(&TRUSTEE_USER_DOMAIN_ID), config.get(&TRUSTEE_USER_DOMAIN_NAME))
                    .unwrap_or(DomainRef::Id("default".into())),
            }),
            (None, None) => None,
        };
        let keystone_tls = client_tls(config, &CLIENTS_KEYSTONE_TLS);
        Some(IdentitySettings {
            trustee_auth_url: text(config.get(&TRUSTEE_AUTH_URL)).unwrap_or_else(|| auth_uri.clone()),
            auth_uri,
            trusts: config.get(&DEFERRED_AUTH_METHOD) == "trusts",
            trusts_delegated_roles: config.get(&TRUSTS_DELEGATED_ROLES),
            auth_encryption_key: config.get(&AUTH_ENCRYPTION_KEY),
            stack_user_domain: domain(config.get(&STACK_USER_DOMAIN_ID), config.get(&STACK_USER_DOMAIN_NAME)),
            stack_domain_admin: text(config.get(&STACK_DOMAIN_ADMIN)),
            stack_domain_admin_password: config.get(&STACK_DOMAIN_ADMIN_PASSWORD).unwrap_or_default(),
            heat_stack_user_role: config.get(&HEAT_STACK_USER_ROLE),
            trustee,
            trustee_password: config.get(&TRUSTEE_PASSWORD).unwrap_or_default(),
            client_retry_limit: keelson_runtime::config::clamp_u32(config.get(&CLIENT_RETRY_LIMIT)),
            client_timeout: crate::options::positive_seconds(config, &crate::options::CLIENT_TIMEOUT),
            endpoints: CLIENT_ENDPOINT_TYPES.iter().fold(
                EndpointChoice::new(&config.get(&CLIENTS_ENDPOINT_TYPE), text(config.get(&REGION_NAME_FOR_SERVICES))),
                |choice, (client, opt)| match text(config.get(opt)) {
                    Some(endpoint_type) => choice.with_client(client, &endpoint_type),
                    None => choice,
                },
            ),
            client_tls: CLIENT_TLS
                .iter()
                .map(|(client, own)| (client.to_string(), client_tls(config, own)))
                .filter(|(_, tls)| *tls != keystone_tls)
                .collect(),
            tls: keystone_tls,
        })
    }
}

/// The user a stack is created for, as the gateway authenticated them.
#[derive(Debug, Clone, Default)]
pub struct Trustor {
    pub token: String,
    pub user_id: String,
    pub project_id: String,
    pub roles: Vec<String>,
}

/// A stack's stored credentials (Heat's `user_creds` row), decrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCreds {
    pub trust_id: String,
    pub trustor_user_id: String,
    pub project_id: String,
}

/// A stack user: a Keystone user in the stack's stack-user project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackUser {
    pub user_id: String,
    pub project_id: String,
}

/// At most this many trust-scoped sessions are kept (one per active stack).
const STORED_SESSIONS_MAX: usize = 1024;

/// The engine's Keystone.
pub struct Identity {
    settings: IdentitySettings,
    http: HttpClient,
    crypt: Crypt,
    /// The trustee, unscoped: who trusts delegate to.
    trustee: Option<Session>,
    /// The stack-user domain's admin, scoped to the domain.
    domain_admin: Option<Session>,
    stack_domain_id: OnceCell<String>,
    stack_user_role_id: OnceCell<String>,
    /// Trust-scoped sessions by trust id.
    stored: Mutex<HashMap<String, Arc<Session>>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").field("auth_uri", &self.settings.auth_uri).finish_non_exhaustive()
    }
}

fn keystone_error(what: &str, e: OsError) -> EngineError {
    match e {
        OsError::Unauthorized(m) | OsError::Forbidden(m) => {
            tracing::warn!(target: "keelson::identity", "{what}: {m}");
            EngineError::AuthorizationFailure("Authorization failed.".into())
        }
        other => {
            tracing::warn!(target: "keelson::identity", "{what}: {other}");
            EngineError::internal(format!("{what}: {other}"))
        }
    }
}

impl Identity {
    /// The engine's Keystone; unusable TLS files or encryption key refuse it.
    pub fn new(settings: IdentitySettings) -> Result<Identity, IdentitySetupError> {
        let tls_error = |client: &str| {
            let client = client.to_string();
            move |error| IdentitySetupError::Tls { client, error }
        };
        let mut http = HttpClient::new(settings.client_timeout, settings.client_retry_limit)
            .with_tls(&settings.tls)
            .map_err(tls_error("keystone"))?;
        for (client, tls) in &settings.client_tls {
            http = http.with_client_tls(client, tls).map_err(tls_error(client))?;
        }
        let trustee = settings.trustee.clone().map(|user| {
            Session::new(
                http.clone(),
                &settings.trustee_auth_url,
                AuthMethod::Password { user, password: settings.trustee_password.clone(), scope: Scope::Unscoped },
            )
        });
        let domain_admin = match (&settings.stack_user_domain, &settings.stack_domain_admin) {
            (Some(domain), Some(admin)) => Some(Session::new(
                http.clone(),
                &settings.auth_uri,
                AuthMethod::Password {
                    user: UserRef::Name { name: admin.clone(), domain: domain.clone() },
                    password: settings.stack_domain_admin_password.clone(),
                    scope: Scope::Domain(domain.clone()),
                },
            )),
            _ => None,
        };
        let crypt = Crypt::new(&settings.auth_encryption_key)?;
        Ok(Identity {
            settings,
            http,
            crypt,
            trustee,
            domain_admin,
            stack_domain_id: OnceCell::new(),
            stack_user_role_id: OnceCell::new(),
            stored: Mutex::new(HashMap::new()),
        })
    }

    pub fn settings(&self) -> &IdentitySettings {
        &self.settings
    }

    pub fn crypt(&self) -> &Crypt {
        &self.crypt
    }

    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// Keystone's v3 endpoint as instances are told it (`auth_url`).
    pub fn v3_endpoint(&self) -> String {
        keelson_openstack::session::identity_v3(&self.settings.auth_uri)
    }

    /// Whether stacks get trusts.
    pub fn uses_trusts(&self) -> bool {
        self.settings.trusts
    }

    /// Whether stack users can be made (a stack-user domain and its admin).
    pub fn has_stack_domain(&self) -> bool {
        self.domain_admin.is_some()
    }

    /// Heat's `create_trust_context`: a trust from `trustor` to the
    /// trustee for the trustor's project.
    pub async fn create_trust(&self, trustor: &Trustor) -> Result<StoredCreds, EngineError> {
        let Some(trustee) = &self.trustee else {
            tracing::error!(target: "keelson::identity", "no [trustee] credentials in the configuration");
            return Err(EngineError::AuthorizationFailure("Authorization failed.".into()));
        };
        let trustee_id =
            trustee.access().await.map_err(|e| keystone_error("trustee authentication", e))?.user_id.clone();
        let roles = if self.settings.trusts_delegated_roles.is_empty() {
            Roles::Names(trustor.roles.clone())
        } else {
            Roles::Names(self.settings.trusts_delegated_roles.clone())
        };
        let user = Session::new(
            self.http.clone(),
            &self.settings.auth_uri,
            AuthMethod::Existing { token: trustor.token.clone() },
        );
        let id = KeystoneApi::new(&user)
            .create_trust(&trustor.user_id, &trustee_id, &trustor.project_id, &roles, true)
            .await
            .map_err(|e| match e {
                OsError::NotFound(_) => {
                    let names = match &roles {
                        Roles::Names(n) | Roles::Ids(n) => n.join(", "),
                    };
                    EngineError::MissingCredentialError(format!("Missing required credential: roles {names}"))
                }
                other => keystone_error("trust creation", other),
            })?;
        tracing::info!(target: "keelson::identity", trust = id, trustor = trustor.user_id, "trust created");
        Ok(StoredCreds {
            trust_id: id,
            trustor_user_id: trustor.user_id.clone(),
            project_id: trustor.project_id.clone(),
        })
    }

    /// Heat's `StoredContext`: a session that authenticates the trustee
    /// scoped to the stack's trust, acting as the trustor.
    pub fn stored_context(&self, creds: &StoredCreds) -> Result<Arc<Session>, EngineError> {
        let Some(user) = self.settings.trustee.clone() else {
            return Err(EngineError::AuthorizationFailure("Authorization failed.".into()));
        };
        let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = stored.get(&creds.trust_id) {
            return Ok(s.clone());
        }
        if stored.len() >= STORED_SESSIONS_MAX {
            stored.clear();
        }
        let session = Arc::new(
            Session::new(
                self.http.clone(),
                &self.settings.trustee_auth_url,
                AuthMethod::Password {
                    user,
                    password: self.settings.trustee_password.clone(),
                    scope: Scope::Trust(creds.trust_id.clone()),
                },
            )
            .with_endpoint_choice(self.settings.endpoints.clone()),
        );
        stored.insert(creds.trust_id.clone(), session.clone());
        Ok(session)
    }

    /// The stored context's token, checked as Heat's `_v3_client_init`
    /// checks it: trust-scoped, and impersonating the trustor. Answers the
    /// roles the trust gives (what policy sees of a deferred action).
    pub async fn authenticate_stored(&self, creds: &StoredCreds) -> Result<Vec<String>, EngineError> {
        let session = self.stored_context(creds)?;
        let access = session.access().await.map_err(|e| keystone_error("trust authentication", e))?;
        if access.trust_id.as_deref() != Some(creds.trust_id.as_str()) {
            tracing::error!(target: "keelson::identity", "trust token re-scoping failed!");
            return Err(EngineError::AuthorizationFailure("Authorization failed.".into()));
        }
        if access.user_id != creds.trustor_user_id {
            tracing::error!(target: "keelson::identity", "Trust impersonation failed");
            return Err(EngineError::AuthorizationFailure("Authorization failed.".into()));
        }
        Ok(access.role_names.clone())
    }

    /// Deletes a stack's trust, through the trust itself (the trustor's
    /// token may be long gone); a trust already gone, or one Keystone no
    /// longer honours, is done (Heat ignores NotFound and Unauthorized).
    pub async fn delete_trust(&self, creds: &StoredCreds) -> Result<(), EngineError> {
        let session = self.stored_context(creds)?;
        let result = KeystoneApi::new(&session).delete_trust(&creds.trust_id).await;
        self.stored.lock().unwrap_or_else(|p| p.into_inner()).remove(&creds.trust_id);
        match result {
            Ok(()) => {
                tracing::info!(target: "keelson::identity", trust = creds.trust_id, "trust deleted");
                Ok(())
            }
            Err(OsError::Unauthorized(m)) => {
                tracing::warn!(target: "keelson::identity", trust = creds.trust_id, "trust not deleted: {m}");
                Ok(())
            }
            Err(e) => Err(keystone_error("trust deletion", e)),
        }
    }

    fn domain_admin(&self) -> Result<&Session, EngineError> {
        self.domain_admin.as_ref().ok_or_else(|| {
            EngineError::internal(
                "Cannot create stack domain users: no stack_user_domain_id and stack_domain_admin configured",
            )
        })
    }

    /// The stack-user domain's id (the admin's domain-scoped token tells it).
    pub async fn stack_domain_id(&self) -> Result<String, EngineError> {
        let admin = self.domain_admin()?;
        let id = self
            .stack_domain_id
            .get_or_try_init(|| async {
                match &self.settings.stack_user_domain {
                    Some(DomainRef::Id(id)) => Ok(id.clone()),
                    _ => {
                        let access = admin.access().await.map_err(|e| keystone_error("domain admin", e))?;
                        access
                            .domain_id
                            .clone()
                            .ok_or_else(|| EngineError::AuthorizationFailure("Authorization failed.".into()))
                    }
                }
            })
            .await?;
        Ok(id.clone())
    }

    /// Heat's `create_stack_domain_project`: `<project>-<stack id>` (64
    /// characters at most) in the stack-user domain.
    pub async fn create_stack_project(&self, project_id: &str, stack_id: &str) -> Result<String, EngineError> {
        let domain = self.stack_domain_id().await?;
        let name: String = format!("{project_id}-{stack_id}").chars().take(64).collect();
        KeystoneApi::new(self.domain_admin()?)
            .create_project(&name, &domain, "Heat stack user project")
            .await
            .map_err(|e| keystone_error("stack user project creation", e))
    }

    /// Heat's `delete_stack_domain_project`: only a project of the
    /// stack-user domain is deleted.
    pub async fn delete_stack_project(&self, project_id: &str) -> Result<(), EngineError> {
        let domain = self.stack_domain_id().await?;
        let api = KeystoneApi::new(self.domain_admin()?);
        match api.project_domain(project_id).await {
            Ok(None) => return Ok(()),
            Ok(Some(d)) if d != domain => {
                tracing::warn!(target: "keelson::identity", "Not deleting non heat-domain project");
                return Ok(());
            }
            Ok(Some(_)) => {}
            Err(OsError::Forbidden(_)) => {
                tracing::warn!(target: "keelson::identity", "Unable to get details for project {project_id}, not deleting");
                return Ok(());
            }
            Err(e) => return Err(keystone_error("stack user project lookup", e)),
        }
        api.delete_project(project_id).await.map_err(|e| keystone_error("stack user project deletion", e))
    }

    async fn stack_user_role_id(&self) -> Result<String, EngineError> {
        let role = &self.settings.heat_stack_user_role;
        let id = self
            .stack_user_role_id
            .get_or_try_init(|| async {
                match KeystoneApi::new(self.domain_admin()?).role_id(role).await {
                    Ok(Some(id)) => Ok(id),
                    Ok(None) => Err(EngineError::internal(format!("Can't find role {role}"))),
                    Err(e) => Err(keystone_error("role lookup", e)),
                }
            })
            .await?;
        Ok(id.clone())
    }

    /// Heat's `create_stack_domain_user`: the user (named after the
    /// resource, its last 255 characters) in the stack-user domain, default
    /// project the stack's, with the stack user role there.
    pub async fn create_stack_user(
        &self,
        name: &str,
        project_id: &str,
        password: &str,
    ) -> Result<StackUser, EngineError> {
        let domain = self.stack_domain_id().await?;
        let role = self.stack_user_role_id().await?;
        let api = KeystoneApi::new(self.domain_admin()?);
        let tail: String = {
            let chars: Vec<char> = name.chars().collect();
            chars[chars.len().saturating_sub(255)..].iter().collect()
        };
        let user_id = api
            .create_user(&tail, password, &domain, project_id)
            .await
            .map_err(|e| keystone_error("stack user creation", e))?;
        api.grant_project_role(project_id, &user_id, &role).await.map_err(|e| keystone_error("stack user role", e))?;
        Ok(StackUser { user_id, project_id: project_id.to_string() })
    }

    /// Heat's `_check_stack_domain_user`, then the delete; a user already
    /// gone is deleted.
    pub async fn delete_stack_user(&self, user: &StackUser) -> Result<(), EngineError> {
        let domain = self.stack_domain_id().await?;
        let api = KeystoneApi::new(self.domain_admin()?);
        match api.user(&user.user_id).await.map_err(|e| keystone_error("stack user lookup", e))? {
            None => Ok(()),
            Some(found) if found.domain_id != domain => {
                Err(EngineError::ValueError("User delete in invalid domain".into()))
            }
            Some(found) if found.default_project_id.as_deref() != Some(user.project_id.as_str()) => {
                Err(EngineError::ValueError("User delete in invalid project".into()))
            }
            Some(_) => api.delete_user(&user.user_id).await.map_err(|e| keystone_error("stack user deletion", e)),
        }
    }

    /// Heat's `create_stack_domain_user_keypair`: an EC2 credential of the
    /// stack user in the stack's project (access: a uuid's hex, secret:
    /// random).
    pub async fn create_keypair(&self, user: &StackUser) -> Result<Ec2Credential, EngineError> {
        let access = uuid::Uuid::new_v4().simple().to_string();
        let secret = crate::identity::random_password();
        KeystoneApi::new(self.domain_admin()?)
            .create_ec2_credential(&user.user_id, &user.project_id, &access, &secret)
            .await
            .map_err(|e| keystone_error("EC2 credential creation", e))
    }

    /// Heat's `stack_domain_user_token`: the stack user's own token,
    /// scoped to its project.
    pub async fn stack_user_token(&self, user: &StackUser, password: &str) -> Result<String, EngineError> {
        let session = Session::new(
            self.http.clone(),
            &self.settings.auth_uri,
            AuthMethod::Password {
                user: UserRef::Id(user.user_id.clone()),
                password: password.to_string(),
                scope: Scope::Project(keelson_openstack::ProjectRef::Id(user.project_id.clone())),
            },
        );
        Ok(session.access().await.map_err(|e| keystone_error("stack user token", e))?.token.clone())
    }

    pub async fn delete_keypair(&self, credential_id: &str) -> Result<(), EngineError> {
        KeystoneApi::new(self.domain_admin()?)
            .delete_credential(credential_id)
            .await
            .map_err(|e| keystone_error("EC2 credential deletion", e))
    }
}

/// Heat's `generate_openstack_password`: 32 characters, at least one of
/// each class Keystone's password rules may ask for.
pub fn random_password() -> String {
    use rand::seq::SliceRandom as _;
    use rand::Rng as _;
    const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const DIGITS: &[u8] = b"0123456789";
    const PUNCT: &[u8] = b"!#%*+-.:=?@^_~";
    let mut rng = rand::thread_rng();
    let all: Vec<u8> = [LOWER, UPPER, DIGITS, PUNCT].concat();
    let mut chars: Vec<u8> =
        [LOWER, UPPER, DIGITS, PUNCT].iter().filter_map(|class| class.choose(&mut rng).copied()).collect();
    while chars.len() < 32 {
        chars.push(all[rng.gen_range(0..all.len())]);
    }
    chars.shuffle(&mut rng);
    String::from_utf8(chars).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> IdentitySettings {
        let mut config = Config::default();
        config.merge_text(text, std::path::Path::new("heat.conf")).unwrap();
        IdentitySettings::from_config(&config).unwrap()
    }

    #[test]
    fn the_clients_endpoint_options_make_the_endpoint_choice() {
        let keystone = "[clients_keystone]\nauth_uri = http://keystone:5000\n";
        assert_eq!(settings(keystone).endpoints, EndpointChoice::default());
        assert_eq!(settings(keystone).client_timeout, std::time::Duration::from_secs(300));
        let chosen = settings(&format!(
            "[DEFAULT]\nregion_name_for_services = RegionTwo\n[clients]\nendpoint_type = internalURL\n\
             [clients_nova]\nendpoint_type = publicURL\n[clients_cinder]\nendpoint_type =\n{keystone}"
        ));
        let choice = chosen.endpoints;
        assert_eq!((choice.interface("nova"), choice.interface("neutron")), ("public", "internal"));
        // An empty per-client value leaves the client on [clients]'.
        assert_eq!(choice.interface("cinder"), "internal");
        assert_eq!(choice.region(), Some("RegionTwo"));
    }

    /// Heat's `get_ssl_options`: a client's own option wins over
    /// `[clients]`'s; the service clients keep their own settings only
    /// where they differ from Keystone's.
    #[test]
    fn the_clients_tls_options_per_client() {
        let keystone = "[clients_keystone]\nauth_uri = https://keystone:5000\n";
        let plain = settings(keystone);
        assert_eq!((plain.tls, plain.client_tls), (TlsSettings::default(), BTreeMap::new()));
        let shared = settings(&format!("[clients]\nca_file = /ca.pem\ninsecure = true\n{keystone}"));
        let all = TlsSettings { ca_file: Some("/ca.pem".into()), insecure: true, ..TlsSettings::default() };
        assert_eq!((&shared.tls, shared.client_tls.len()), (&all, 0));
        let own = settings(&format!(
            "[clients]\nca_file = /ca.pem\ncert_file = /c.pem\n[clients_nova]\ninsecure = true\n\
             [clients_neutron]\nca_file = /neutron-ca.pem\n{keystone}"
        ));
        let clients = TlsSettings { ca_file: Some("/ca.pem".into()), cert_file: Some("/c.pem".into()), ..all };
        assert_eq!(own.tls, TlsSettings { insecure: false, ..clients.clone() });
        assert_eq!(own.client_tls.keys().collect::<Vec<_>>(), ["neutron", "nova"]);
        assert_eq!(own.client_tls["nova"], clients);
        let neutron = TlsSettings { ca_file: Some("/neutron-ca.pem".into()), insecure: false, ..clients };
        assert_eq!(own.client_tls["neutron"], neutron);
        // A file that cannot be read refuses the engine's Keystone.
        let e = Identity::new(own).err().unwrap();
        assert!(matches!(&e, IdentitySetupError::Tls { client, .. } if client == "keystone"), "{e}");
    }
}
